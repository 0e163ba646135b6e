import ArgumentParser
import CoordCore
import Coordinator
import Foundation
import ZeroMQ

/// `coord keys new NAME`: a CURVE certificate pair for a node or a coordinator (CONTRACT §8).
struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make CURVE keys for nodes and coordinators.",
        subcommands: [New.self])

    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write NAME.key (public: give it to the other side) and NAME.key_secret (keep it here, mode 0600).",
            discussion: """
            A node runs with --cert NAME.key_secret and --authorized DIR holding the coordinators' NAME.key files; the rig \
            file names the coordinator's pair (security: {cert: coordinator.key_secret}) and pins each node's key \
            (public_key: "…" from the node's NAME.key, or cert: NAME.key). The files are ZeroMQ certificates, the same \
            as czmq's zcert and pyzmq's zmq.auth.create_certificates write.
            """)

        @Argument(help: "The certificate's name ([A-Za-z0-9._-]{1,64}), usually the host's.") var name: String
        @Option(help: "Directory to write into (created if missing).") var dir: String = "."

        func run() throws {
            if let problem = RigName.problem(with: name, kind: "key") { throw CoordError(.usage, problem) }
            do {
                let written = try CurveCertificate.writeNew(name: name, directory: dir)
                print("public key \(written.pair.publicKey)")
                print("wrote \(written.publicPath) (public) and \(written.secretPath) (secret, mode 0600)")
            } catch {
                throw CoordError(.failure, error.description)
            }
        }
    }
}
