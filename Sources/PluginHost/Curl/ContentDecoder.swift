import CCurlShim
import PluginSDK

/// Undoes a response body's content codings (RFC 9110 §8.4), the last one listed first, as the
/// body arrives: for ``CurlTransport``, which decodes bodies itself rather than leave it to
/// libcurl (from 8.5 on, libcurl fails a body in a coding nobody asked for instead of handing
/// it over as it came). The decoders are the system's zlib, brotli and zstd, loaded at run time.
///
/// Used by one transfer's callbacks, on the event-loop thread.
final class ContentDecoder {
    /// One decoder per coding, in the order they are undone, with each one's output buffer and
    /// coding (for errors).
    private var stages: [(decoder: OpaquePointer, output: UnsafeMutableRawBufferPointer, coding: String)] = []
    /// The bytes each stage but the last has passed on so far: its output is the next stage's
    /// input, which the body's limits must bound too (a stage that turns much into nothing would
    /// otherwise keep the loop thread busy unchecked).
    private var passedOn: [Int64] = []
    /// Where a decoder writes why it failed.
    private var reason = [CChar](repeating: 0, count: 256)

    /// How much one decoder gives out at a time (libcurl's receive buffer).
    static let outputBytes = 16 << 10

    /// The most codings one body may stack (libcurl's own cap): each holds a decoder, its
    /// window and a buffer, and a server lists them for free.
    static let maxCodings = 5

    /// The codings whose decoder keeps a window the server sizes (`br` up to 16 MiB, `zstd` up to
    /// 8 MiB): each is undone at most once per body.
    static let windowed = ["br", "zstd"]

    /// The codings this process decodes, in the order a request lists them: `gzip` and
    /// `deflate` where zlib loads, `br` and `zstd` where their libraries do.
    static let available = ["gzip", "deflate", "br", "zstd"].filter { ph_decode_available(number(of: $0)!) != 0 }

    /// The decoder number of `coding` (lower-case), 0 for `identity`, nil for one not known here.
    static func number(of coding: String) -> Int32? {
        switch coding {
        case "gzip", "x-gzip": PH_CODING_GZIP
        case "deflate": PH_CODING_DEFLATE
        case "br": PH_CODING_BR
        case "zstd": PH_CODING_ZSTD
        case "identity": 0
        default: nil
        }
    }

    /// Decoders of `codings` (lower-case, as listed in `Content-Encoding`); `identity` is
    /// skipped, and with nothing else to undo the decoder passes bytes on as they came.
    ///
    /// - Throws: a ``TransportFailure`` (`badResponse`) naming a coding that has no decoder here.
    init(codings: [String]) throws(TransportFailure) {
        for coding in codings.reversed() {
            guard let number = Self.number(of: coding) else {
                throw TransportFailure(kind: .badResponse, message: "cannot decode the response body: no decoder of \(coding)")
            }
            if number == 0 { continue }
            guard let decoder = reason.withUnsafeMutableBufferPointer({ ph_decoder_new(number, $0.baseAddress, $0.count) }) else {
                throw failure()
            }
            stages.append((decoder, UnsafeMutableRawBufferPointer.allocate(byteCount: Self.outputBytes, alignment: 16), coding))
        }
        passedOn = Array(repeating: 0, count: stages.count)
    }

    deinit {
        for stage in stages {
            ph_decoder_free(stage.decoder)
            stage.output.deallocate()
        }
    }

    /// Decodes `input`, handing each piece of the decoded body to `sink`, which returns false to
    /// stop (nothing more is decoded). Returns false when `sink` or `bound` stopped.
    ///
    /// With codings stacked, `bound` is asked, after each piece a stage passes on to the next
    /// one, with all that stage has passed on so far, and returns false to stop: the limits of
    /// a decoded body apply at every stage, not only to what comes out of the last.
    ///
    /// - Throws: a ``TransportFailure`` (`badResponse`) when the body is not in its codings
    ///   (corrupt, or bytes after its end), with the decoder's reason.
    func decode(
        _ input: UnsafeRawBufferPointer, into sink: (UnsafeRawBufferPointer) -> Bool, bound: (Int64) -> Bool
    ) throws(TransportFailure) -> Bool {
        try feed(0, input, sink, bound)
    }

    /// Gives `input` to stage `index`, and everything it gives out to the next stage (the last
    /// one's to `sink`), until the input is taken and the stage holds nothing more.
    private func feed(
        _ index: Int, _ input: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) -> Bool, _ bound: (Int64) -> Bool
    ) throws(TransportFailure) -> Bool {
        guard index < stages.count else { return input.isEmpty || sink(input) }
        let (decoder, output, _) = stages[index]
        var offset = 0
        while true {
            var consumed = 0
            var produced = 0
            let rest = input.count - offset
            let status = reason.withUnsafeMutableBufferPointer { reasonBuffer in
                ph_decoder_step(
                    decoder, rest > 0 ? input.baseAddress!.advanced(by: offset).assumingMemoryBound(to: UInt8.self) : nil, rest, &consumed,
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count, &produced, reasonBuffer.baseAddress, reasonBuffer.count)
            }
            guard status != PH_DECODE_ERROR else { throw failure() }
            offset += consumed
            if produced > 0 {
                if index + 1 < stages.count {
                    passedOn[index] += Int64(produced)
                    guard bound(passedOn[index]) else { return false }
                }
                guard try feed(index + 1, UnsafeRawBufferPointer(rebasing: output[0..<produced]), sink, bound) else { return false }
            }
            // All taken, and the output not filled: the decoder holds nothing more to give.
            if offset == input.count, produced < output.count { return true }
            if consumed == 0, produced == 0 {
                // Input left that the decoder no longer takes (zlib at the end of its stream).
                throw TransportFailure(
                    kind: .badResponse,
                    message: "cannot decode the response body: \(input.count - offset) bytes follow the end of the \(stages[index].coding) body")
            }
        }
    }

    /// The first coding (in the order they are undone) whose coded stream has not ended, or nil
    /// when all have: asked once the body is in, a name here means it was cut short.
    var unfinishedCoding: String? {
        stages.first { ph_decoder_ended($0.decoder) == 0 }?.coding
    }

    /// The decoder's last reason, as a failure.
    private func failure() -> TransportFailure {
        let text = reason.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return TransportFailure(kind: .badResponse, message: "cannot decode the response body: \(text)")
    }
}
