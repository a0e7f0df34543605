import Foundation
import Testing

/// The README and docs/ link to each other's files and sections; a file
/// renamed or a heading reworded would leave a reader at a dead link. Every
/// relative link must name a file that exists and, with `#anchor`, a heading
/// of that file (GitHub's anchors: lower case, punctuation dropped, spaces
/// as `-`).
@Suite("Documentation links")
struct DocumentationLinksTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static var documents: [String] {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)) ?? []
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    @Test func everyRelativeLinkResolves() throws {
        var checked = 0
        for document in Self.documents {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            let directory = Self.root.appendingPathComponent(document).deletingLastPathComponent()
            for target in Self.links(in: Self.prose(text)) where !Self.hasScheme(target) {
                checked += 1
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let file = parts[0].isEmpty ? Self.root.appendingPathComponent(document)
                    : directory.appendingPathComponent(String(parts[0])).standardized
                guard FileManager.default.fileExists(atPath: file.path) else {
                    Issue.record("\(document): \(target): no such file")
                    continue
                }
                guard parts.count == 2, file.pathExtension == "md" else { continue }
                let headings = Self.anchors(try String(contentsOf: file, encoding: .utf8))
                #expect(headings.contains(String(parts[1])), "\(document): \(target): no such heading")
            }
        }
        #expect(checked > 50)  // the README and the guide alone have more
    }

    /// The text outside fenced code blocks.
    static func prose(_ text: String) -> [Substring] {
        var inFence = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            if line.hasPrefix("```") { inFence.toggle() }
            return !inFence && !line.hasPrefix("```")
        }
    }

    /// The targets of `[text](target)` links.
    static func links(in lines: [Substring]) -> [String] {
        lines.flatMap { line in
            line.components(separatedBy: "](").dropFirst().compactMap { rest in
                rest.firstIndex(of: ")").map { String(rest[..<$0]) }.flatMap { $0.contains(" ") ? nil : $0 }
            }
        }
    }

    static func hasScheme(_ target: String) -> Bool {
        guard let colon = target.firstIndex(of: ":") else { return false }
        return !target[..<colon].contains { $0 == "/" || $0 == "#" || $0 == "." }
    }

    /// Each heading's anchor as GitHub makes it; a repeated one gets `-1`, `-2`….
    static func anchors(_ text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var result: Set<String> = []
        for line in prose(text) where line.hasPrefix("#") {
            let title = line.drop { $0 == "#" }
            guard title.first == " " else { continue }
            let kept = title.trimmingCharacters(in: .whitespaces).lowercased()
                .filter { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == " " }
            let slug = kept.replacingOccurrences(of: " ", with: "-")
            let count = seen[slug, default: 0]
            seen[slug] = count + 1
            result.insert(count == 0 ? slug : "\(slug)-\(count)")
        }
        return result
    }
}
