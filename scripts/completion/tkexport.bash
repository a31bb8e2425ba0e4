# bash completion for tkexport: subcommands, their options, and files where a file is expected.
# Installed to share/bash-completion/completions/tkexport; or: source scripts/completion/tkexport.bash
# Written by hand; tests/completion.cmake checks every option here against `tkexport SUB --help`.

_tkexport_options() {
    case "$1" in
        analyze) echo "--build-dir --cache-dir --extra-arg --format --help --jobs --max-depth --no-cache --output --verbose --version" ;;
        lint) echo "--build-dir --cache-dir --checks --extra-arg --format --help --jobs --max-depth --no-cache --output --werror --version" ;;
        lsp) echo "--build-dir --checks --debounce --help --max-depth --verbose --version" ;;
        export) echo "--build-dir --cache-dir --extra-arg --help --jobs --max-depth --no-cache --output --program --weights --version" ;;
        inspect) echo "--format --help --version" ;;
        compile) echo "--arch --autotune --cache-dir --help --jobs --no-cache --no-sign --output --quiet --sign-key --version" ;;
        run) echo "--allow-unsigned --bench --bind --dense-outputs --device --help --input --output-dir --prefill --profile --seed --shapes --warmup --version" ;;
        keygen) echo "--force --help --output --trust --version" ;;
    esac
}

_tkexport() {
    local cur prev sub
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    if ((COMP_CWORD == 1)); then
        COMPREPLY=($(compgen -W "analyze lint lsp export inspect compile run keygen --help --version" -- "$cur"))
        return
    fi
    sub=${COMP_WORDS[1]}
    case "$prev" in
        --format)
            case "$sub" in
                lint) COMPREPLY=($(compgen -W "text json sarif" -- "$cur")) ;;
                inspect) COMPREPLY=($(compgen -W "text json dot" -- "$cur")) ;;
                *) COMPREPLY=($(compgen -W "text json" -- "$cur")) ;;
            esac
            return ;;
        --device|-d) [[ $sub == run ]] && { COMPREPLY=($(compgen -W "cpu cuda cuda:0 cuda:1" -- "$cur")); return; } ;;
        --shapes|-S) COMPREPLY=($(compgen -W "fixed cycle uniform file:" -- "$cur")); return ;;
        --prefill|-P) COMPREPLY=($(compgen -W "auto now off" -- "$cur")); return ;;
        --arch) COMPREPLY=($(compgen -W "native sm_80 sm_86 sm_89 sm_90 sm_100 sm_120" -- "$cur")); return ;;
        --build-dir|-p|--cache-dir|--output-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --program|-P|--checks|--bench|--warmup|--seed|--jobs|-j|--max-depth|--debounce|--extra-arg|--input|-i) return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_tkexport_options "$sub")" -- "$cur"))
        return
    fi
    case "$sub" in
        compile|inspect) COMPREPLY=($(compgen -f -X '!*.@(tkprog|tkpkg)' -- "$cur") $(compgen -d -- "$cur")) ;;
        run) COMPREPLY=($(compgen -f -X '!*.tkpkg' -- "$cur") $(compgen -d -- "$cur")) ;;
        *) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
}
shopt -s extglob 2>/dev/null
complete -o filenames -F _tkexport tkexport
