/// The answer for the last input asked, kept so that the same input asked again (an app's
/// requests repeat a few URLs, secrets, credentials and header values) is answered without
/// computing it again. Thread-safe; the input is compared where it is kept, under the lock (no
/// copy of it made to compare), and the answer is computed outside the lock.
///
/// ```swift
/// let keys = LastAnswer<String, HMACSHA256.Key>()
/// let key = keys.answer(for: secret) { HMACSHA256.Key(Array($0.utf8)) }
/// ```
///
/// Inlinable, like ``PerRequestState``: a plugin's calls are specialised for its own types
/// (generic code across the module boundary looks up type metadata on every call).
public final class LastAnswer<Input: Equatable, Answer> {
    @usableFromInline let last = Locked<(input: Input, answer: Answer)?>(nil)

    /// An empty memory.
    public init() {}

    /// The answer for `input`: the kept one when `input` equals the last input asked, else
    /// `compute(input)`, which is then kept in its place.
    @inlinable
    public func answer(for input: Input, _ compute: (Input) -> Answer) -> Answer {
        if let kept = last.withLock({ $0 != nil && $0!.input == input ? $0!.answer : nil }) { return kept }
        let computed = compute(input)
        last.withLock { $0 = (input, computed) }
        return computed
    }
}

// Safe: the kept pair is only touched under its lock, and crosses threads only when Sendable.
extension LastAnswer: @unchecked Sendable where Input: Sendable, Answer: Sendable {}
