/// A CURVE key pair as Z85 text (40 characters each), as ZeroMQ certificate files hold it.
public struct CurveKeys: Equatable, Sendable {
    public var publicKey: String
    public var secretKey: String

    public init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }
}

/// What one coordinator-to-node link is secured with: the node's pinned public key and the coordinator's pair.
public struct LinkKeys: Equatable, Sendable {
    public var serverKey: String
    public var client: CurveKeys

    public init(serverKey: String, client: CurveKeys) {
        self.serverKey = serverKey
        self.client = client
    }
}
