import CPluginABI
import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A loaded plugin's batch of header edits (`request_edit_headers`) may use the bytes it borrowed
/// from the request's own fields (a field removed by the name it read, a value copied from
/// another field): they stay valid until every edit of the batch is made, though the batch
/// changes the list they were read from. (Debug builds overwrite a dropped copy of the fields,
/// so a read of it after it went would show here.) Counts and lengths past `Int.max` are refused.
struct BorrowedEditBytesTests {
    /// A request with fields `X-A: one` and `X-B: two`, its state, and its handle as a plugin sees it.
    private func request() -> (RequestState, OpaquePointer) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:9/")!)
        request.setValue("one", forHTTPHeaderField: "X-A")
        request.setValue("two", forHTTPHeaderField: "X-B")
        let state = RequestState(request)
        state.handle.reset(mayRespond: false)
        return (state, OpaquePointer(Unmanaged.passUnretained(state.handle).toOpaque()))
    }

    /// The request's fields as a plugin reads them, borrowed.
    private func fields(_ pointer: OpaquePointer) -> (names: [ph_bytes], values: [ph_bytes]) {
        var names = [ph_bytes](repeating: ph_bytes(), count: 8)
        var values = [ph_bytes](repeating: ph_bytes(), count: 8)
        let count = HostTable.template.request_headers(pointer, &names, &values, 8)
        return (Array(names.prefix(count)), Array(values.prefix(count)))
    }

    /// `fields` as name/value strings, sorted by name.
    private func sorted(_ fields: [HTTPHeader]) -> [String] {
        fields.map { "\($0.name): \($0.value)" }.sorted()
    }

    @Test func aBatchMayUseTheBytesItReadFromTheFieldsItChanges() {
        let (state, pointer) = request()
        let api = HostTable.template
        let own = Array("X-C".utf8) + Array("X-D".utf8)
        own.withUnsafeBufferPointer { buffer in
            let xC = ph_bytes(data: buffer.baseAddress, len: 3)
            let xD = ph_bytes(data: buffer.baseAddress! + 3, len: 3)
            var badIndex = -1
            // On the request's original fields: X-B set to X-A's value, X-C added with X-B's, X-A removed.
            var read = fields(pointer)
            #expect(read.names.map(CBytes.string) == ["X-A", "X-B"])
            var edits = [
                ph_header_edit(op: PH_EDIT_SET, name: read.names[1], value: read.values[0]),
                ph_header_edit(op: PH_EDIT_ADD, name: xC, value: read.values[1]),
                ph_header_edit(op: PH_EDIT_REMOVE, name: read.names[0], value: ph_bytes()),
            ]
            #expect(api.request_edit_headers(pointer, &edits, edits.count, &badIndex) == PH_OK)
            #expect(sorted(state.headers) == ["X-B: one", "X-C: two"])
            // On the list that batch changed (its copy is what a change drops): X-B set to X-C's
            // value, X-C removed, X-D added with X-B's value as it was read.
            read = fields(pointer)
            #expect(read.names.map(CBytes.string) == ["X-B", "X-C"])
            edits = [
                ph_header_edit(op: PH_EDIT_SET, name: read.names[0], value: read.values[1]),
                ph_header_edit(op: PH_EDIT_REMOVE, name: read.names[1], value: ph_bytes()),
                ph_header_edit(op: PH_EDIT_ADD, name: xD, value: read.values[0]),
            ]
            #expect(api.request_edit_headers(pointer, &edits, edits.count, &badIndex) == PH_OK)
            #expect(sorted(state.headers) == ["X-B: two", "X-D: one"])
        }
    }

    /// A failure's message is copied for the plugin once per result: a plugin that asks again
    /// (the SDK asks in every response hook) gets the same bytes, where each call copied it anew
    /// into the result's arena (a plugin that polled it grew the request's memory).
    @Test func aFailuresMessageIsCopiedOnce() {
        let api = HostTable.template
        let failure = ResultHandle(response: nil, failure: TransportFailure(kind: .timedOut, message: "timed out"), mayDecide: false)
        let handle = OpaquePointer(Unmanaged.passUnretained(failure).toOpaque())
        var first = ph_bytes()
        var again = ph_bytes()
        #expect(api.result_failure(handle, &first) == TransportFailureKind.timedOut.abiCode)
        #expect(api.result_failure(handle, &again) == TransportFailureKind.timedOut.abiCode)
        #expect(CBytes.string(first) == "timed out" && CBytes.string(again) == "timed out")
        #expect(first.data == again.data)
    }

    @Test func countsAndLengthsPastIntMaxAreRefused() {
        let (state, pointer) = request()
        let api = HostTable.template
        let before = state.headers
        let bytes = Array("X-E".utf8)
        bytes.withUnsafeBufferPointer { buffer in
            let name = ph_bytes(data: buffer.baseAddress, len: 3)
            var badIndex = -1
            // A count of SIZE_MAX arrives as -1: refused as oversize.
            var edits = [ph_header_edit(op: PH_EDIT_SET, name: name, value: name)]
            #expect(api.request_edit_headers(pointer, &edits, -1, &badIndex) == PH_INVALID)
            #expect(badIndex == Int(PH_MAX_HEADER_EDITS))
            // A name's length past Int.max: refused at its index.
            edits = [
                ph_header_edit(op: PH_EDIT_SET, name: name, value: name),
                ph_header_edit(op: PH_EDIT_REMOVE, name: ph_bytes(data: buffer.baseAddress, len: -1), value: ph_bytes()),
            ]
            #expect(api.request_edit_headers(pointer, &edits, edits.count, &badIndex) == PH_INVALID)
            #expect(badIndex == 1)
            // A value's: refused for a set or an add; a removal reads no value.
            edits = [ph_header_edit(op: PH_EDIT_ADD, name: name, value: ph_bytes(data: buffer.baseAddress, len: -3))]
            #expect(api.request_edit_headers(pointer, &edits, edits.count, &badIndex) == PH_INVALID)
            #expect(badIndex == 0)
            #expect(state.headers == before)
            edits = [ph_header_edit(op: PH_EDIT_REMOVE, name: ph_bytes(data: buffer.baseAddress, len: 3), value: ph_bytes(data: nil, len: -3))]
            #expect(api.request_edit_headers(pointer, &edits, edits.count, &badIndex) == PH_OK)
            #expect(state.headers == before)
        }
    }

    @Test func otherCountsPastIntMaxAreReadAsTheirSizeMeans() {
        let (state, pointer) = request()
        let api = HostTable.template
        // A snapshot's capacity of SIZE_MAX: room for every field.
        var names = [ph_bytes](repeating: ph_bytes(), count: 2)
        var values = [ph_bytes](repeating: ph_bytes(), count: 2)
        #expect(api.request_headers(pointer, &names, &values, -1) == 2)
        #expect(names.map(CBytes.string) == ["X-A", "X-B"] && values.map(CBytes.string) == ["one", "two"])
        // An answer with SIZE_MAX fields: refused.
        state.handle.reset(mayRespond: true)
        #expect(api.request_respond(pointer, 200, &names, &values, -1, ph_bytes()) == PH_INVALID)
        #expect(state.handle.answer == nil)
        // A count of 2^40 whose first field is bad: refused at it, no room reserved for them all
        // (the reservation aborted the process).
        "X Bad".withCString { bad in
            var badNames = [ph_bytes(data: UnsafeRawPointer(bad).assumingMemoryBound(to: UInt8.self), len: 5)]
            var badValues = [ph_bytes(data: UnsafeRawPointer(bad).assumingMemoryBound(to: UInt8.self), len: 1)]
            #expect(api.request_respond(pointer, 200, &badNames, &badValues, 1 << 40, ph_bytes()) == PH_INVALID)
        }
        #expect(state.handle.answer == nil)
        // SIZE_MAX random bytes, or an event with SIZE_MAX fields: nothing written or read.
        let table = HostTable(services: BoundServices(services: PluginServices(), plugin: "p"))
        var byte: UInt8 = 7
        table.table.pointee.random_bytes(UnsafePointer(table.table), &byte, -1)
        #expect(byte == 7)
        let events = Locked<[PluginEvent]>([])
        let subscription = table.services.services.subscribe { event in events.withLock { $0.append(event) } }
        defer { subscription.cancel() }
        table.table.pointee.emit(UnsafePointer(table.table), ph_bytes(), &names, &values, -1)
        #expect(events.withLock { $0 }.map(\.fields) == [[:]])
    }

    @Test func fieldIndexesCapacitiesAndLengthsPastIntMaxInSingleCalls() throws {
        let (state, pointer) = request()
        let api = HostTable.template
        var name = ph_bytes()
        var value = ph_bytes()
        // A field index of SIZE_MAX (a C loop counting down past 0): no field, nothing read.
        #expect(api.request_header_at(pointer, -1, &name, &value) == PH_NOT_FOUND)
        #expect(name.data == nil && value.data == nil)
        #expect(api.request_header_at(pointer, 1, &name, &value) == PH_OK && CBytes.string(value) == "two")
        #expect(api.request_header_at(pointer, 2, &name, &value) == PH_NOT_FOUND && CBytes.string(value) == "two")
        // The same of a result's fields, and no field of a failure.
        let response = ResponseState(SyntheticResponse(statusCode: 200, headers: [HTTPHeader(name: "X-R", value: "r")]), url: nil)
        let result = OpaquePointer(Unmanaged.passUnretained(response.handle).toOpaque())
        var resultName = ph_bytes()
        var resultValue = ph_bytes()
        #expect(api.result_header_at(result, -1, &resultName, &resultValue) == PH_NOT_FOUND)
        #expect(api.result_header_at(result, 1, &resultName, &resultValue) == PH_NOT_FOUND)
        #expect(resultName.data == nil && resultValue.data == nil)
        #expect(api.result_header_at(result, 0, &resultName, &resultValue) == PH_OK)
        #expect(CBytes.string(resultName) == "X-R" && CBytes.string(resultValue) == "r")
        let failure = ResultHandle(response: nil, failure: TransportFailure(kind: .timedOut, message: "t"), mayDecide: false)
        #expect(api.result_header_at(OpaquePointer(Unmanaged.passUnretained(failure).toOpaque()), 0, &resultName, &resultValue) == PH_NOT_FOUND)
        // A value's length of SIZE_MAX in a single setter: refused, as in a batch.
        let bytes = Array("X-F".utf8)
        let status = bytes.withUnsafeBufferPointer { buffer in
            let field = ph_bytes(data: buffer.baseAddress, len: 3)
            return (
                api.request_set_header(pointer, field, ph_bytes(data: buffer.baseAddress, len: -1)),
                api.request_add_header(pointer, field, ph_bytes(data: buffer.baseAddress, len: -1))
            )
        }
        #expect(status.0 == PH_INVALID && status.1 == PH_INVALID)
        #expect(sorted(state.headers) == ["X-A: one", "X-B: two"])
        // A store read with a capacity of SIZE_MAX: room for the value.
        let services = PluginServices()
        services.setValue("secret", forKey: "k")
        let table = HostTable(services: BoundServices(services: services, plugin: "p"))
        var out = [UInt8](repeating: 0, count: 16)
        let length = Array("k".utf8).withUnsafeBufferPointer { key in
            table.table.pointee.kv_get(UnsafePointer(table.table), ph_bytes(data: key.baseAddress, len: 1), &out, -1)
        }
        #expect(length == 6 && String(decoding: out.prefix(6), as: UTF8.self) == "secret")
        // A buffer too small gets what it holds (out[0..capacity)), and the whole length.
        var small = [UInt8](repeating: 0xAA, count: 4)
        let prefixLength = Array("k".utf8).withUnsafeBufferPointer { key in
            table.table.pointee.kv_get(UnsafePointer(table.table), ph_bytes(data: key.baseAddress, len: 1), &small, 3)
        }
        #expect(prefixLength == 6 && small == Array("sec".utf8) + [0xAA])
        // A credential's length past the buffer, or of SIZE_MAX, as a plugin may write it.
        let written = Array("user".utf8) + [UInt8](repeating: 0, count: 4)
        #expect(LoadedPlugin.text(written, length: 4) == "user")
        #expect(LoadedPlugin.text(written, length: 100).utf8.count == 8)
        #expect(LoadedPlugin.text(written, length: -1) == "")
    }

    /// The response side of ``HostilePluginTests/bytesThatAreNoBufferChangeNothing()``: a body
    /// that is no buffer (NULL data with a length, or a length past `Int.max`) leaves the result
    /// as it was through `result_set_body`, and `result_set_body_checked` (ABI 1.5) and
    /// `result_replace` say PH_INVALID; a failure has no body to set.
    @Test func aResultBodyThatIsNoBufferChangesNothing() {
        let api = HostTable.template
        let response = ResponseState(SyntheticResponse(statusCode: 200, headers: [], body: Array("kept".utf8)), url: nil)
        let handle = OpaquePointer(Unmanaged.passUnretained(response.handle).toOpaque())
        let byte: [UInt8] = [1]
        byte.withUnsafeBufferPointer { one in
            for bytes in [ph_bytes(data: nil, len: 4), ph_bytes(data: one.baseAddress, len: -1)] {
                api.result_set_body(handle, bytes)
                #expect(api.result_set_body_checked(handle, bytes) == PH_INVALID)
                response.handle.reset(mayDecide: true)
                #expect(api.result_replace(handle, 200, nil, nil, 0, bytes) == PH_INVALID)
                #expect(response.handle.replacement == nil)
            }
            #expect(String(decoding: response.data, as: UTF8.self) == "kept")
            #expect(api.result_set_body_checked(handle, ph_bytes(data: one.baseAddress, len: 1)) == PH_OK)
            #expect(response.data == Data([1]))
            // An empty body is a buffer: no data needed.
            #expect(api.result_set_body_checked(handle, ph_bytes(data: nil, len: 0)) == PH_OK)
            #expect(response.data.isEmpty)
        }
        let failure = ResultHandle(response: nil, failure: TransportFailure(kind: .timedOut, message: "t"), mayDecide: false)
        #expect(api.result_set_body_checked(OpaquePointer(Unmanaged.passUnretained(failure).toOpaque()), ph_bytes()) == PH_INVALID)
    }

    /// A store key, a background option or a credential to refresh that is no buffer is refused
    /// (not read as the empty string, which names something else).
    @Test func keysAndOptionsThatAreNoBufferAreRefused() {
        let services = PluginServices()
        services.setValue("empty-named", forKey: "")
        let table = HostTable(services: BoundServices(services: services, plugin: "p"))
        let api = table.table.pointee
        var out = [UInt8](repeating: 0, count: 16)
        let byte: [UInt8] = [UInt8(ascii: "r")]
        byte.withUnsafeBufferPointer { one in
            let endless = ph_bytes(data: one.baseAddress, len: -1)
            #expect(api.kv_get(UnsafePointer(table.table), endless, &out, 16) == -1)
            #expect(api.kv_get(UnsafePointer(table.table), ph_bytes(data: nil, len: 0), &out, 16) == 11)

            // A background exchange from this plugin's prepare: refused for the option, then taken.
            let (state, pointer) = request()
            state.chainNames = ["p"]
            state.preparingIndex = 0
            #expect(api.request_background(UnsafePointer(table.table), pointer, endless) == PH_INVALID)
            #expect(state.backgroundRequests.isEmpty)
            #expect(api.request_background(UnsafePointer(table.table), pointer, ph_bytes(data: one.baseAddress, len: 1)) == PH_OK)
            #expect(state.backgroundRequests.map(\.option) == ["r"])

            // A retry asking for a refresh: refused for the key or a known stale value, then taken.
            let response = ResponseState(SyntheticResponse(statusCode: 401, headers: []), url: nil)
            let handle = OpaquePointer(Unmanaged.passUnretained(response.handle).toOpaque())
            response.handle.reset(mayDecide: true)
            #expect(api.result_retry(handle, 0, endless, ph_bytes(), 0) == PH_INVALID)
            #expect(api.result_retry(handle, 0, ph_bytes(data: one.baseAddress, len: 1), ph_bytes(data: nil, len: 3), 1) == PH_INVALID)
            #expect(response.handle.retry == nil)
            #expect(api.result_retry(handle, 0, ph_bytes(data: one.baseAddress, len: 1), ph_bytes(data: nil, len: 3), 0) == PH_OK)
            #expect(response.handle.retry?.refresh?.key == "r")
        }
    }

    /// A header value that is no buffer (NULL data with a length) is refused by every setter that
    /// takes one, single or batched, request or response, and by an answer's fields: not stored
    /// as an empty value.
    @Test func headerValuesThatAreNoBufferAreRefused() {
        let api = HostTable.template
        let (state, pointer) = request()
        let response = ResponseState(SyntheticResponse(statusCode: 200, headers: [HTTPHeader(name: "X-R", value: "r")]), url: nil)
        let result = OpaquePointer(Unmanaged.passUnretained(response.handle).toOpaque())
        let bytes = Array("X-N".utf8)
        bytes.withUnsafeBufferPointer { buffer in
            let name = ph_bytes(data: buffer.baseAddress, len: 3)
            let noData = ph_bytes(data: nil, len: 3)
            #expect(api.request_set_header(pointer, name, noData) == PH_INVALID)
            #expect(api.request_add_header(pointer, name, noData) == PH_INVALID)
            var edits = [ph_header_edit(op: PH_EDIT_SET, name: name, value: name), ph_header_edit(op: PH_EDIT_ADD, name: name, value: noData)]
            var bad = 0
            #expect(api.request_edit_headers(pointer, &edits, 2, &bad) == PH_INVALID && bad == 1)
            #expect(sorted(state.headers) == ["X-A: one", "X-B: two"])
            #expect(api.result_set_header(result, name, noData) == PH_INVALID)
            #expect(api.result_add_header(result, name, noData) == PH_INVALID)
            #expect(sorted(response.headers) == ["X-R: r"])
            var names = [name]
            var values = [noData]
            state.handle.reset(mayRespond: true)
            #expect(api.request_respond(pointer, 200, &names, &values, 1, ph_bytes()) == PH_INVALID)
            #expect(state.handle.answer == nil)
            response.handle.reset(mayDecide: true)
            #expect(api.result_replace(result, 200, &names, &values, 1, ph_bytes()) == PH_INVALID)
            #expect(response.handle.replacement == nil)
        }
    }

    /// An answer's fields with the bytes of the last answer's are that list (checked when it was
    /// made); other bytes, or bytes that are no buffer where the kept value is empty, are read
    /// and checked anew.
    @Test func anAnswerWithTheLastAnswersBytesReusesItsFields() {
        let memo = Locked<[HTTPHeader]>([])
        /// `answerFields` of `pairs` laid out in buffers of their own (as a plugin lays out each
        /// answer anew); a nil value is bytes that are no buffer (no data, 3 bytes).
        func answer(_ pairs: [(name: String, value: String?)]) -> [HTTPHeader]? {
            var buffers: [UnsafeMutableBufferPointer<UInt8>] = []
            defer { for buffer in buffers { buffer.deallocate() } }
            func bytes(_ text: String) -> ph_bytes {
                let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, text.utf8.count))
                _ = buffer.initialize(fromContentsOf: text.utf8)
                buffers.append(buffer)
                return ph_bytes(data: text.isEmpty ? nil : UnsafePointer(buffer.baseAddress), len: text.utf8.count)
            }
            let names = pairs.map { bytes($0.name) }
            let values = pairs.map { $0.value.map(bytes) ?? ph_bytes(data: nil, len: 3) }
            return HostTable.answerFields(names, values, pairs.count, memo: memo)
        }
        func storage(_ fields: [HTTPHeader]?) -> UnsafeRawPointer? { fields?.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) } }

        let first = answer([("X-A", "one"), ("X-E", "")])
        #expect(first == [HTTPHeader(name: "X-A", value: "one"), HTTPHeader(name: "X-E", value: "")])
        // The same bytes in other buffers: the kept list itself.
        let again = answer([("X-A", "one"), ("X-E", "")])
        #expect(again == first && storage(again) == storage(first))
        // Bytes that are no buffer (no data, 3 bytes) where the kept value is empty: refused.
        #expect(answer([("X-A", "one"), ("X-E", nil)]) == nil)
        // A value with CR LF, or a name that is no token: refused, and the kept list stays.
        #expect(answer([("X-A", "a\r\nb"), ("X-E", "")]) == nil)
        #expect(answer([("X A", "one"), ("X-E", "")]) == nil)
        #expect(storage(answer([("X-A", "one"), ("X-E", "")])) == storage(first))
        // Other bytes: a new list, kept in its place.
        let other = answer([("X-A", "on")])
        #expect(other == [HTTPHeader(name: "X-A", value: "on")] && storage(other) != storage(first))
        #expect(storage(answer([("X-A", "on")])) == storage(other))
        #expect(answer([("X-A", "one"), ("X-E", "")]) == first)

        // With a list kept: bytes that are no buffer, or counts and arrays that are refused,
        // are refused still; an answer without fields leaves the list kept.
        let text = Array("X-AoneX-E".utf8)
        text.withUnsafeBufferPointer { buffer in
            let base = buffer.baseAddress!
            let names = [ph_bytes(data: base, len: 3), ph_bytes(data: base + 6, len: 3)]
            let values = [ph_bytes(data: base + 3, len: 3), ph_bytes(data: nil, len: 0)]
            let kept = HostTable.answerFields(names, values, 2, memo: memo)
            #expect(kept == first && storage(HostTable.answerFields(names, values, 2, memo: memo)) == storage(kept))
            // A value of -1 bytes (SIZE_MAX) where the kept value is empty.
            #expect(HostTable.answerFields(names, [values[0], ph_bytes(data: base, len: -1)], 2, memo: memo) == nil)
            // A name without data.
            #expect(HostTable.answerFields([ph_bytes(data: nil, len: 3), names[1]], values, 2, memo: memo) == nil)
            // A count of SIZE_MAX, and no arrays.
            #expect(HostTable.answerFields(names, values, -1, memo: memo) == nil)
            #expect(HostTable.answerFields(nil, nil, 2, memo: memo) == nil)
            #expect(HostTable.answerFields(nil, nil, 0, memo: memo) == [])
            #expect(storage(HostTable.answerFields(names, values, 2, memo: memo)) == storage(kept))
        }
    }
}
