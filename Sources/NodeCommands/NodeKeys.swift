import ArgumentParser
import CoordCore
import Foundation
import ZeroMQ

/// `coord-node keys new NAME`: the node's own CURVE pair, so a box (its package's postinst) makes its keys without
/// the coordinator's program; the same files as `coord keys new` (CONTRACT §8).
struct NodeKeys: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys", abstract: "Make this node's CURVE keys.", subcommands: [New.self])

    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write NAME.key (public: pin it in the rig file) and NAME.key_secret (mode 0600); never overwrites.")

        @Argument(help: "The certificate's name ([A-Za-z0-9._-]{1,64}).") var name: String
        @Option(help: "Directory to write into (created if missing).") var dir: String = "."

        func run() throws {
            if let problem = RigName.problem(with: name, kind: "key") {
                FileHandle.standardError.write(Data("coord-node: \(problem)\n".utf8))
                throw ExitCode(2)
            }
            do {
                let written = try CurveCertificate.writeNew(name: name, directory: dir)
                print("public key \(written.pair.publicKey)")
                print("wrote \(written.publicPath) (public) and \(written.secretPath) (secret, mode 0600)")
            } catch {
                FileHandle.standardError.write(Data("coord-node: \(error.description)\n".utf8))
                throw ExitCode(1)
            }
        }
    }
}
