/// Shell completion scripts from the same declarations as the parser and
/// `--help` (`birdctl --generate-completion-script bash|zsh|fish`; `make
/// install` writes them).
enum Completions {
    enum Shell: String, CaseIterable { case bash, zsh, fish }

    static func script(for shell: Shell) -> String {
        switch shell {
        case .bash: bash()
        case .zsh: zsh()
        case .fish: fish()
        }
    }

    /// Where Bluetooth adapters are listed for `--adapter`.
    static let adapters = "ls /sys/class/bluetooth 2>/dev/null"
    static let fields = "name color alpha"
    static let topLevel = ["help", "--help", "--version"]

    /// The options whose value is one of a few words, with the words, by name.
    static func choices() -> [(name: String, words: [String])] {
        var seen: Set<String> = []
        return Birdctl.commands.flatMap(\.options).compactMap { option in
            guard case .choices(let words) = option.completion, seen.insert(option.name).inserted else { return nil }
            return (option.name, words)
        }
    }

    /// Whether a command's operands are fields (read, watch, set).
    static func takesFields(_ command: Command) -> Bool {
        command.operands.split(whereSeparator: { " []".contains($0) }).contains { $0 == "name|color|alpha" || $0 == "FIELD" }
    }

    static func bash() -> String {
        var cases = ""
        for command in Birdctl.commands {
            let names = command.options.map(\.name).joined(separator: " ")
            let valued = command.options.filter(\.takesValue).map(\.name).joined(separator: " ")
            let operands = takesFields(command) ? fields : ""
            cases += "        \(command.name)) options=\"\(names)\" valued=\"\(valued)\" operands=\"\(operands)\" ;;\n"
        }
        let adapterOptions = Set(Birdctl.commands.flatMap(\.options).filter { $0.completion == .adapter }.map(\.name))
        let fileOptions = Set(Birdctl.commands.flatMap(\.options).filter { $0.completion == .file }.map(\.name))
        var choiceCases = ""
        for (name, words) in choices() {
            choiceCases += "        \(name)) COMPREPLY=($(compgen -W \"\(words.joined(separator: " "))\" -- \"$cur\")); return ;;\n"
        }
        return """
            # bash completion for birdctl (birdctl --generate-completion-script bash)
            _birdctl() {
                local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
                COMPREPLY=()
                if (( COMP_CWORD == 1 )); then
                    COMPREPLY=($(compgen -W "\((Birdctl.commands.map(\.name) + topLevel).joined(separator: " "))" -- "$cur"))
                    return
                fi
                local options valued operands
                case ${COMP_WORDS[1]} in
            \(cases)        *) return ;;
                esac
                case $prev in
                    \(adapterOptions.sorted().joined(separator: "|"))) COMPREPLY=($(compgen -W "$(\(adapters))" -- "$cur")); return ;;
                    \(fileOptions.sorted().joined(separator: "|"))) COMPREPLY=($(compgen -f -- "$cur")); return ;;
            \(choiceCases)    esac
                [[ " $valued " == *" $prev "* ]] && return
                if [[ $cur == -* ]]; then
                    COMPREPLY=($(compgen -W "$options" -- "$cur"))
                else
                    COMPREPLY=($(compgen -W "$operands" -- "$cur"))
                fi
            }
            complete -F _birdctl birdctl
            """
    }

    static func zsh() -> String {
        /// Inside '…', with `specials` backslash-escaped (`[`/`]` in an
        /// option's description, `:` in a message).
        func quoted(_ text: String, escaping specials: Set<Character> = ["[", "]", "\\"]) -> String {
            var out = ""
            for c in text {
                if c == "'" {
                    out += "'\\''"
                } else {
                    if specials.contains(c) { out += "\\" }
                    out.append(c)
                }
            }
            return out
        }
        let commands = Birdctl.commands.map { "        '\($0.name):\(quoted($0.summary, escaping: [":"]))'" }
            .joined(separator: "\n")
        var cases = ""
        for command in Birdctl.commands {
            var specs = command.options.map { option -> String in
                let help = "[\(quoted(option.help))]"
                guard let value = option.value else { return "'\(option.name)\(help)'" }
                let action = switch option.completion {
                case .adapter: "_birdctl_adapters"
                case .file: "_files"
                case .choices(let words): "(\(words.joined(separator: " ")))"
                case .none: " "
                }
                return "'\(option.name)\(help):\(quoted(value, escaping: [":"])):\(action)'"
            }
            if takesFields(command) { specs.append("'*:field:(\(fields))'") }
            cases += "        \(command.name)) _arguments -s \(specs.joined(separator: " ")) ;;\n"
        }
        return """
            #compdef birdctl
            # zsh completion for birdctl (birdctl --generate-completion-script zsh)
            _birdctl_adapters() {
                local -a adapters
                adapters=(${(f)"$(\(adapters))"})
                _describe 'adapter' adapters
            }

            _birdctl() {
                local -a commands
                commands=(
            \(commands)
                )
                if (( CURRENT == 2 )); then
                    _describe 'command' commands
                    return
                fi
                shift words
                (( CURRENT-- ))
                case $words[1] in
            \(cases)    esac
            }

            _birdctl "$@"
            """
    }

    static func fish() -> String {
        func quoted(_ text: String) -> String { "'" + text.replacingAll("\\", with: "\\\\").replacingAll("'", with: "\\'") + "'" }
        var lines = [
            "# fish completion for birdctl (birdctl --generate-completion-script fish)",
            "complete -c birdctl -f",
            "complete -c birdctl -n __fish_use_subcommand -l version -d 'print the version'",
        ]
        for command in Birdctl.commands {
            lines.append("complete -c birdctl -n __fish_use_subcommand -a \(command.name) -d \(quoted(command.summary))")
        }
        for command in Birdctl.commands {
            let condition = "'__fish_seen_subcommand_from \(command.name)'"
            for option in command.options {
                var line = "complete -c birdctl -n \(condition) -l \(option.name.dropFirst(2))"
                if option.takesValue { line += " -r" }
                if option.completion == .adapter { line += " -a '(\(adapters))'" }
                if option.completion == .file { line += " -F" }
                if case .choices(let words) = option.completion { line += " -f -a '\(words.joined(separator: " "))'" }
                lines.append(line + " -d \(quoted(option.help))")
            }
            if takesFields(command) { lines.append("complete -c birdctl -n \(condition) -a '\(fields)'") }
        }
        return lines.joined(separator: "\n")
    }
}
