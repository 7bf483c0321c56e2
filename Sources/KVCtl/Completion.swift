/// The shells `kvctl completion SHELL` writes a script for.
public enum Shell: String, CaseIterable, Sendable {
    case bash, zsh, fish
}

/// `kvctl completion bash|zsh|fish`: a completion script for the shell, generated from kvctl's
/// own tables (``Help/entries``, the global options, ``ValueParser``'s type flags), so it cannot
/// drift from what kvctl accepts.
///
/// The scripts complete commands and their aliases, global options, `set`'s type flags, the
/// words of a `a|b|c` argument, file names, and domain and key names. Domains and keys are asked
/// of the running kvd with `kvctl [--socket PATH] [--system] --no-autostart domains` (or
/// `keys DOMAIN`), taking `--socket`/`--system` from the line being completed, with errors
/// hidden: Tab never starts kvd and never prints anything when none runs. Names from kvd are
/// never evaluated by the shell (bash's `compgen -W` would expand `$(...)` in them).
public enum Completion {
    /// What one positional argument of a command completes to.
    enum Slot: Equatable {
        case domain, key, file, command, value
        /// One of these words (`completion bash|zsh|fish`), or a flag (`--format`).
        case words([String])
        case none

        /// The name the scripts use: `domain`, `key`, `file`, `command`, `value`, `none`, or the
        /// words joined with `|`.
        var scriptName: String {
            switch self {
            case .domain: "domain"
            case .key: "key"
            case .file: "file"
            case .command: "command"
            case .value: "value"
            case .words(let words): words.joined(separator: "|")
            case .none: "none"
            }
        }
    }

    /// The options before the command.
    static let globalOptions = ["--socket", "--system", "--json", "--no-autostart", "--null", "--version", "--help"]

    /// `set`'s type flags: the scalar ones and those that build arrays, dictionaries or any value.
    static var typeFlags: [String] {
        ValueParser.scalarFlags.keys.sorted() + ["-array", "-array-add", "-dict", "-dict-add", "--json"]
    }

    /// The slots of a command, read from its usage line (`get DOMAIN [KEY]`: domain, key), so a
    /// new command completes without being listed here. A trailing `VALUE...` repeats; a
    /// `--flag` in the usage line completes to itself.
    static func slots(of entry: Help.Entry) -> [Slot] {
        entry.usage.split(separator: " ").dropFirst().map { word in
            let bare = String(word.filter { !"[].".contains($0) })
            switch bare {
            case "DOMAIN": return .domain
            case "KEY", "OLD", "NEW": return .key
            case "FILE|-", "FILE": return .file
            case "COMMAND": return .command
            case "TYPE-FLAG", "VALUE": return .value
            default:
                let words = bare.split(separator: "|").map(String.init)
                // `bash|zsh|fish`, or a flag such as `--format` (its value comes next).
                return (words.count > 1 || bare.hasPrefix("--")) && bare == bare.lowercased() ? .words(words) : .none
            }
        }
    }

    /// The command names and aliases.
    static var commandNames: [String] {
        Help.entries.flatMap { [$0.name] + $0.aliases }
    }

    /// The completion script for `shell`, to be sourced (bash, zsh) or put where the shell
    /// looks for completions.
    public static func script(for shell: Shell) -> String {
        switch shell {
        case .bash: bashScript
        case .zsh: zshScript
        case .fish: fishScript
        }
    }

    /// `case` arms for bash and zsh: `get|read) echo "domain key" ;;`.
    private static var shSlotCases: String {
        Help.entries.map { entry in
            let names = ([entry.name] + entry.aliases).joined(separator: "|")
            return "        \(names)) echo \"\(slots(of: entry).map(\.scriptName).joined(separator: " "))\" ;;"
        }.joined(separator: "\n")
    }

    /// `_kvctl_slots CMD`, shared by the bash and zsh scripts: prints the slots of the command's
    /// arguments.
    static var shSlotsFunction: String {
        """
        # The slots of a command's arguments: domain key file command value none, or a|b words.
        _kvctl_slots() {
            case $1 in
        \(shSlotCases)
            esac
        }

        """
    }

    /// `case` arms for fish: `case get read; echo domain key`.
    private static var fishSlotCases: String {
        Help.entries.map { entry in
            let names = ([entry.name] + entry.aliases).joined(separator: " ")
            return
                "        case \(names)\n            printf '%s\\n' \(slots(of: entry).map { "'\($0.scriptName)'" }.joined(separator: " "))"
        }.joined(separator: "\n")
    }

    static func words(_ list: [String]) -> String { list.joined(separator: " ") }
}

extension Completion {
    private static var zshScript: String {
        """
        #compdef kvctl
        # zsh completion for kvctl; made by `kvctl completion zsh`. Put it in a folder of $fpath
        # as _kvctl, or load it with: source <(kvctl completion zsh)

        \(shSlotsFunction)
        # kvctl with the --socket/--system of the line being completed, never starting kvd,
        # errors hidden.
        _kvctl_ask() {
            local -a connection=(--no-autostart)
            local i
            for ((i = 2; i < CURRENT; i++)); do
                case ${(Q)words[i]} in
                    --system) connection+=(--system) ;;
                    --socket) connection+=(--socket "${(Q)words[i+1]}"); ((i++)) ;;
                    --socket=*) connection+=("${(Q)words[i]}") ;;
                    -*) ;;
                    *) break ;;
                esac
            done
            "${(Q)words[1]}" "${connection[@]}" "$@" 2>/dev/null
        }

        _kvctl() {
            local i=2 command="" slot
            local -a names
            while ((i < CURRENT)); do
                case ${(Q)words[i]} in
                    --socket) ((i += 2)) ;;
                    -*) ((i++)) ;;
                    *) command=${(Q)words[i]}; break ;;
                esac
            done
            if [[ -z $command ]]; then
                if [[ ${words[CURRENT-1]} == --socket ]]; then
                    _files
                elif [[ $PREFIX == -* ]]; then
                    compadd -- \(words(globalOptions))
                else
                    compadd -- \(words(commandNames))
                fi
                return
            fi
            local -a slots=(${=$(_kvctl_slots $command)})
            slot=${slots[CURRENT - i]}
            [[ -z $slot && ${slots[-1]} == value ]] && slot=value
            case $slot in
                domain) names=(-g ${(0)"$(_kvctl_ask --null domains)"}); compadd -- "${names[@]}" ;;
                key) names=(${(0)"$(_kvctl_ask --null keys "${(Q)words[i+1]}")"}); compadd -- "${names[@]}" ;;
                file) _files ;;
                command) compadd -- \(words(commandNames)) ;;
                value) [[ $PREFIX == -* ]] && compadd -- \(words(typeFlags)) ;;
                --* | *'|'*) compadd -- ${(s:|:)slot} ;;
            esac
        }

        if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
            _kvctl "$@"
        else
            compdef _kvctl kvctl
        fi

        """
    }

    private static var fishScript: String {
        """
        # fish completion for kvctl; made by `kvctl completion fish`. Put it in
        # vendor_completions.d as kvctl.fish, or load it with: kvctl completion fish | source

        # The slots of a command's arguments: domain key file command value none, or a|b words.
        function __kvctl_slots
            switch $argv[1]
        \(fishSlotCases)
            end
        end

        # kvctl with the --socket/--system of the line being completed, never starting kvd,
        # errors hidden.
        function __kvctl_ask
            set -l words (commandline -opc)
            set -l connection --no-autostart
            set -l i 2
            while test $i -le (count $words)
                switch $words[$i]
                    case --system
                        set -a connection --system
                    case --socket
                        set i (math $i + 1)
                        set -a connection --socket $words[$i]
                    case '--socket=*'
                        set -a connection $words[$i]
                    case '-*'
                    case '*'
                        break
                end
                set i (math $i + 1)
            end
            command $words[1] $connection $argv 2>/dev/null
        end

        function __kvctl_complete
            set -l words (commandline -opc)
            set -l cur (commandline -ct)
            set -l i 2
            set -l command
            while test $i -le (count $words)
                switch $words[$i]
                    case --socket
                        set i (math $i + 2)
                    case '-*'
                        set i (math $i + 1)
                    case '*'
                        set command $words[$i]
                        break
                end
            end
            if test -z "$command"
                if test "$words[-1]" = --socket
                    printf '%s\\0' (__fish_complete_path $cur)
                else if string match -q -- '-*' $cur
                    printf '%s\\0' \(words(globalOptions))
                else
                    printf '%s\\0' \(words(commandNames))
                end
                return
            end
            set -l slots (__kvctl_slots $command)
            set -l slot $slots[(math (count $words) - $i + 1)]
            if test -z "$slot"; and test "$slots[-1]" = value
                set slot value
            end
            switch "$slot"
                case domain
                    printf '%s\\0' -g
                    __kvctl_ask --null domains
                case key
                    # fish reads a TAB in a completion as the start of its description, so a
                    # key holding one cannot be offered whole: it is left out.
                    for name in (__kvctl_ask --null keys $words[(math $i + 1)] | string split0)
                        string match -q -- '*'\\t'*' $name; or printf '%s\\0' $name
                    end
                case file
                    printf '%s\\0' (__fish_complete_path $cur)
                case command
                    printf '%s\\0' \(words(commandNames))
                case value
                    string match -q -- '-*' $cur; and printf '%s\\0' \(words(typeFlags))
                case '*|*' '--*'
                    printf '%s\\0' (string split '|' -- $slot)
            end
        end

        # Each completion ends with a NUL: a name may hold a newline.
        complete -c kvctl -f -a '(__kvctl_complete | string split0)'

        """
    }
}
