/// The version of coord and coord-node (`--version`, the handshake's agent_version, discovery); packages add the
/// git commit to it (scripts/package.sh).
public enum CoordVersion {
    public static let current = "0.1.0"
}
