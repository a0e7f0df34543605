import Foundation
import Testing

/// Every `@Test` can fail by an expectation, not only by hanging or
/// crashing: its body, or a function of its file that it calls, holds an
/// `#expect`, `#require` or `Issue.record`.
@Suite("Tests check something")
struct TestsCheckSomethingTests {
    static let tests = LayeringTests.sources.deletingLastPathComponent().appendingPathComponent("Tests")

    @Test func everyTestHasAnExpectation() throws {
        let enumerator = try #require(FileManager.default.enumerator(at: Self.tests, includingPropertiesForKeys: nil))
        var checked = 0
        for case let file as URL in enumerator where file.pathExtension == "swift" {
            let code = Self.code(try String(contentsOf: file, encoding: .utf8))
            let functions = Self.functions(code)
            let checking = Set(functions.filter { Self.expects($0.body) }.map(\.name))
            for function in functions where function.isTest {
                checked += 1
                let callsAChecker = checking.contains { name in function.body.contains(name + "(") || function.body.contains(name + " {") }
                #expect(Self.expects(function.body) || callsAChecker, "\(file.lastPathComponent): \(function.name) checks nothing")
            }
        }
        #expect(checked > 500, "only \(checked) tests found")
    }

    /// This check's own parsing: string literals (one line or several) and
    /// comments are blanked, so braces and words in them count for nothing.
    @Test func literalsAndCommentsAreBlanked() {
        let code = Self.code(#"""
            @Test func a() { let s = "}"; // }
              let t = """
                #expect(}
                """
            }
            func helper() { #expect(true) }
            """#)
        let functions = Self.functions(code)
        #expect(functions.map(\.name) == ["a", "helper"])
        #expect(functions.first.map { Self.expects($0.body) } == false)
        #expect(functions.last.map { Self.expects($0.body) } == true)
    }

    static func expects(_ body: String) -> Bool {
        body.contains("#expect") || body.contains("#require") || body.contains("Issue.record")
    }

    /// The functions of a file: name, whether it is a test, its body.
    static func functions(_ code: String) -> [(name: String, isTest: Bool, body: String)] {
        let characters = Array(code)
        let regex = try! NSRegularExpression(pattern: #"(@Test(?:\([^)]*\))?\s+)?func\s+(\w+)"#)
        var found: [(String, Bool, String)] = []
        for match in regex.matches(in: code, range: NSRange(code.startIndex..., in: code)) {
            guard let nameRange = Range(match.range(at: 2), in: code) else { continue }
            let isTest = match.range(at: 1).location != NSNotFound
            var index = code.distance(from: code.startIndex, to: nameRange.upperBound)
            while index < characters.count, characters[index] != "{" { index += 1 }
            let start = index + 1
            var depth = 1
            index = start
            while index < characters.count, depth > 0 {
                if characters[index] == "{" { depth += 1 } else if characters[index] == "}" { depth -= 1 }
                index += 1
            }
            found.append((String(code[nameRange]), isTest, String(characters[min(start, characters.count)..<max(start, index - 1)])))
        }
        return found
    }

    /// `text` with the contents of its string literals and comments turned
    /// to spaces (newlines kept), every character in its place: a literal
    /// keeps its opening and closing quote.
    static func code(_ text: String) -> String {
        let characters = Array(text)
        var out = characters
        var index = 0
        func at(_ offset: Int) -> Character? { index + offset < characters.count ? characters[index + offset] : nil }
        func blank(_ range: Range<Int>) {
            for i in range where i < characters.count && characters[i] != "\n" { out[i] = " " }
        }
        while index < characters.count {
            let c = characters[index]
            if c == "/", at(1) == "/" {
                let start = index
                while index < characters.count, characters[index] != "\n" { index += 1 }
                blank(start..<index)
            } else if c == "/", at(1) == "*" {
                let start = index
                index += 2
                while index < characters.count, !(characters[index] == "*" && at(1) == "/") { index += 1 }
                index = min(characters.count, index + 2)
                blank(start..<index)
            } else if c == "\"" {
                var hashes = 0
                while index - hashes - 1 >= 0, characters[index - hashes - 1] == "#" { hashes += 1 }
                let quote = at(1) == "\"" && at(2) == "\"" ? 3 : 1
                let closing = Array(String(repeating: "\"", count: quote) + String(repeating: "#", count: hashes))
                let start = index
                index += quote
                while index < characters.count {
                    if hashes == 0, characters[index] == "\\" {
                        index += 2
                        continue
                    }
                    if index + closing.count <= characters.count, Array(characters[index..<(index + closing.count)]) == closing { break }
                    index += 1
                }
                let end = min(characters.count, index + closing.count)
                blank(start..<end)
                out[start] = "\""
                if index < characters.count { out[index] = "\"" }
                index = end
            } else {
                index += 1
            }
        }
        return String(out)
    }
}
