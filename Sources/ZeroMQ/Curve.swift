// CURVE keys and ZeroMQ's certificate files (the format czmq's zcert and pyzmq's zmq.auth write), so keys made
// by `coord keys new`, pyzmq or czmq are interchangeable. With ZeroMQ.swift, the only file that calls libzmq.
import CZeroMQ
import Foundation
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// A CURVE key pair, each key Z85 text of 40 characters (ZeroMQ's certificate files hold them this way).
public struct CurveKeyPair: Sendable, Equatable {
    public var publicKey: String
    public var secretKey: String

    public init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// A new pair from libzmq (libsodium's randomness).
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var pub = [CChar](repeating: 0, count: 41), sec = [CChar](repeating: 0, count: 41)
        _ = try check("zmq_curve_keypair") { zmq_curve_keypair(&pub, &sec) }
        return CurveKeyPair(publicKey: text(pub), secretKey: text(sec))
    }

    /// The public key that belongs to a secret key (nil if the secret key is not a Z85 key).
    public static func publicKey(forSecret secret: String) -> String? {
        guard isZ85Key(secret) else { return nil }
        var pub = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&pub, secret) == 0 else { return nil }
        return text(pub)
    }

    /// A 32-byte binary key as Z85 (ZAP hands the client's key over in binary).
    public static func z85(_ binary: [UInt8]) -> String? {
        guard binary.count == 32 else { return nil }
        var text = [CChar](repeating: 0, count: 41)
        guard zmq_z85_encode(&text, binary, 32) != nil else { return nil }
        return Self.text(text)
    }

    /// A NUL-terminated Z85 buffer from libzmq as a String.
    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static let z85Alphabet = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)

    public static func isZ85Key(_ text: String) -> Bool {
        text.utf8.count == 40 && text.utf8.allSatisfy { z85Alphabet.contains($0) }
    }
}

/// One certificate file: `NAME.key` holds the public key, `NAME.key_secret` both.
public struct CurveCertificate: Sendable, Equatable {
    public var publicKey: String
    public var secretKey: String?

    public init(publicKey: String, secretKey: String? = nil) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Reads the `public-key = "…"` and `secret-key = "…"` lines (comments and the metadata section are
    /// skipped, as zmq.auth.load_certificate does). Throws a sentence naming the file and what is wrong.
    public static func parse(_ text: String, path: String) throws(CurveCertificateError) -> CurveCertificate {
        var publicKey: String?, secretKey: String?
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: CharacterSet(charactersIn: " \t\"'"))
            switch key {
            case "public-key": publicKey = value
            case "secret-key": secretKey = value
            default: continue
            }
        }
        guard let publicKey else { throw .init("\(path) is not a ZeroMQ certificate: it has no public-key line.") }
        guard CurveKeyPair.isZ85Key(publicKey) else {
            throw .init("\(path): public-key must be 40 Z85 characters (a CURVE key), not \(publicKey.count) characters.")
        }
        if let secretKey {
            guard CurveKeyPair.isZ85Key(secretKey) else { throw .init("\(path): secret-key must be 40 Z85 characters (a CURVE key).") }
            guard CurveKeyPair.publicKey(forSecret: secretKey) == publicKey else {
                throw .init("\(path): its public-key does not belong to its secret-key.")
            }
        }
        return CurveCertificate(publicKey: publicKey, secretKey: secretKey)
    }

    public static func load(_ path: String) throws(CurveCertificateError) -> CurveCertificate {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .init("cannot read the certificate \(path): \(describe(error)).")
        }
        return try parse(text, path: path)
    }

    /// A secret certificate as a key pair (throws if the file holds only a public key).
    public static func loadPair(_ path: String) throws(CurveCertificateError) -> CurveKeyPair {
        let certificate = try load(path)
        guard let secret = certificate.secretKey else {
            throw .init("\(path) holds only a public key; give the NAME.key_secret file, which holds the pair.")
        }
        return CurveKeyPair(publicKey: certificate.publicKey, secretKey: secret)
    }

    /// The file's text in zcert's layout.
    public func text(generatedBy: String = "coord") -> String {
        let kind = secretKey == nil
            ? "#   ZeroMQ CURVE Public Certificate\n#   Exchange securely, or use a secure mechanism to verify the contents\n#   of this file after exchange.\n"
            : "#   ZeroMQ CURVE **Secret** Certificate\n#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n"
        var text = "#   ****  Generated on \(Date()) by \(generatedBy)  ****\n" + kind + "\nmetadata\ncurve\n"
        text += "    public-key = \"\(publicKey)\"\n"
        if let secretKey { text += "    secret-key = \"\(secretKey)\"\n" }
        return text
    }

    /// Writes `DIR/NAME.key` and `DIR/NAME.key_secret` (mode 0600) for a new pair; refuses to overwrite either.
    public static func writeNew(name: String, directory: String) throws(CurveCertificateError) -> (publicPath: String, secretPath: String, pair: CurveKeyPair) {
        let pair: CurveKeyPair
        do { pair = try CurveKeyPair.generate() } catch { throw .init("cannot make a CURVE key pair: \(error)") }
        let dir = URL(fileURLWithPath: directory)
        let publicPath = dir.appendingPathComponent("\(name).key").path
        let secretPath = dir.appendingPathComponent("\(name).key_secret").path
        for path in [publicPath, secretPath] where FileManager.default.fileExists(atPath: path) {
            throw .init("\(path) exists; coord never overwrites a key (remove it first if it is really to be replaced).")
        }
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try write(CurveCertificate(publicKey: pair.publicKey).text(), to: publicPath, mode: 0o644)
            try write(CurveCertificate(publicKey: pair.publicKey, secretKey: pair.secretKey).text(), to: secretPath, mode: 0o600)
        } catch let error as CurveCertificateError {
            throw error
        } catch {
            throw .init("cannot write keys into \(directory): \(describe(error)).")
        }
        return (publicPath, secretPath, pair)
    }

    /// Created with its mode from the start, so a secret is never readable by others even for an instant.
    private static func write(_ text: String, to path: String, mode: mode_t) throws {
        let fd: Int32
        do { fd = try POSIX.retryingEINTR("open") { open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) } } catch {
            throw CurveCertificateError("cannot create \(path): \(error.reason).")
        }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        do throws(POSIXFailure) {
            let written = try POSIX.retryingEINTR("write") { bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
            // A certificate is a few hundred bytes: a short write means the disk is full.
            guard written == bytes.count else { throw POSIXFailure("write", errno: ENOSPC) }
            try POSIX.retryingEINTR("fsync") { fsync(fd) }
        } catch {
            throw CurveCertificateError("cannot write \(path): \(error.reason).")
        }
    }

    static func describe(_ error: Error) -> String {
        let ns = error as NSError
        if let posix = ns.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
            return POSIX.text(Int32(posix.code))
        }
        return ns.localizedDescription
    }
}

public struct CurveCertificateError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The public certificates in an `--authorized` directory: every `*.key` file (secret files are ignored).
public struct AuthorizedKeys: Sendable, Equatable {
    /// Public key (Z85) → the certificate's file name, for log lines.
    public var keys: [String: String]
    /// One sentence per file that could not be read (the node logs them and goes on).
    public var problems: [String]

    public static let none = AuthorizedKeys(keys: [:], problems: [])

    public static func load(directory: String) throws(CurveCertificateError) -> AuthorizedKeys {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory) } catch {
            throw .init("cannot read the authorized-keys directory \(directory): \(CurveCertificate.describe(error)).")
        }
        var result = AuthorizedKeys.none
        for name in names.sorted() where name.hasSuffix(".key") {
            let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
            do { result.keys[try CurveCertificate.load(path).publicKey] = name } catch { result.problems.append(error.description) }
        }
        return result
    }
}
