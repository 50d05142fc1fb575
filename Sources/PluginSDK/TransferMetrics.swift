import Foundation

/// How an exchange went, as the transport measured it: when each stage of the last hop ended, in
/// seconds from that hop's start (as libcurl's `CURLINFO_*_TIME_T` count them), how many
/// redirects the transport followed before it and how long they took, the connection, and the
/// body bytes. They are of the last request the transport sent: where the chain sent the request
/// again (an answer to an authentication challenge, an interceptor's retry), of that one.
///
/// The host's `CurlTransport` reports them, for a response (`Response.metrics`,
/// `TransportResponse.metrics`) and for a failed attempt it had started (``TransportFailure/metrics``:
/// a timeout says which stage it reached). `URLSessionTransport`, the stubs and a response an
/// interceptor made or replaced (a cache hit, a stored response a `304` revalidated) have none. A
/// response a hook only edited (status, header fields) keeps its metrics. A stage the exchange
/// never reached is 0 (a proxy's `407` to the tunnel's `CONNECT` has no first byte of the
/// origin's; a timeout while waiting for the answer, none either). They do not cross the plugin
/// ABI: a loaded plugin sees no metrics.
///
/// ```swift
/// let response = try await provider.request(.user("octocat")).value
/// if let metrics = response.metrics {
///     print("first byte after \(metrics.firstByte * 1000) ms, reused connection: \(metrics.reusedConnection)")
/// }
/// ```
public struct TransferMetrics: Sendable, Equatable, CustomStringConvertible {
    /// When the host name was resolved (0 for a reused connection; an address takes microseconds).
    public var nameLookup: TimeInterval
    /// When the connection (TCP; to the proxy, through one) was made (0 for a reused connection).
    public var connect: TimeInterval
    /// When the TLS handshake ended; nil for plain `http` and for a reused connection.
    public var tlsHandshake: TimeInterval?
    /// When the request was about to be sent: every stage before it done.
    public var requestStart: TimeInterval
    /// When the first byte of the response arrived.
    public var firstByte: TimeInterval
    /// When the hop ended, its body read whole (for a failure, when the transport gave up).
    public var total: TimeInterval
    /// How many redirects the transport followed before the last hop.
    public var redirectCount: Int
    /// How long those redirects took, from the first hop's start to the last one's.
    public var redirectTime: TimeInterval
    /// Whether the last hop went over a connection another exchange had made (an earlier one, or
    /// with HTTP/2 one running beside it).
    public var reusedConnection: Bool
    /// The address the last hop was connected to (the proxy's, through one), e.g. `127.0.0.1`;
    /// for a connection that failed before it was complete (its TLS handshake, a proxy tunnel),
    /// the address its socket went to.
    public var remoteAddress: String?
    /// The port the last hop was connected to.
    public var remotePort: Int?
    /// The request body bytes the last hop sent.
    public var requestBodyBytes: Int64
    /// The response body bytes the last hop received, as they came (in their content coding).
    public var responseBodyBytes: Int64

    /// Metrics with these values.
    public init(
        nameLookup: TimeInterval, connect: TimeInterval, tlsHandshake: TimeInterval?, requestStart: TimeInterval, firstByte: TimeInterval,
        total: TimeInterval, redirectCount: Int = 0, redirectTime: TimeInterval = 0, reusedConnection: Bool, remoteAddress: String? = nil,
        remotePort: Int? = nil, requestBodyBytes: Int64 = 0, responseBodyBytes: Int64 = 0
    ) {
        self.nameLookup = nameLookup
        self.connect = connect
        self.tlsHandshake = tlsHandshake
        self.requestStart = requestStart
        self.firstByte = firstByte
        self.total = total
        self.redirectCount = redirectCount
        self.redirectTime = redirectTime
        self.reusedConnection = reusedConnection
        self.remoteAddress = remoteAddress
        self.remotePort = remotePort
        self.requestBodyBytes = requestBodyBytes
        self.responseBodyBytes = responseBodyBytes
    }

    /// One line, times in milliseconds (the name lookup when it took any time):
    /// `total 1.92 ms (name lookup 0.02, connect 0.21, tls 1.10, first byte 1.80), reused no, 127.0.0.1:8443`.
    public var description: String {
        func ms(_ seconds: TimeInterval) -> String { String(format: "%.2f", seconds * 1000) }
        var stages = ["connect \(ms(connect))"]
        if nameLookup > 0 { stages.insert("name lookup \(ms(nameLookup))", at: 0) }
        if let tlsHandshake { stages.append("tls \(ms(tlsHandshake))") }
        stages.append("first byte \(ms(firstByte))")
        var text = "total \(ms(total)) ms (\(stages.joined(separator: ", "))), reused \(reusedConnection ? "yes" : "no")"
        if redirectCount > 0 { text += ", \(redirectCount) redirect\(redirectCount == 1 ? "" : "s") in \(ms(redirectTime)) ms" }
        if let remoteAddress {
            text += ", " + (remoteAddress.contains(":") ? "[\(remoteAddress)]" : remoteAddress) + (remotePort.map { ":\($0)" } ?? "")
        }
        return text
    }
}
