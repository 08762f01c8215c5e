// `cotune completion bash|zsh`: a shell completion script on stdout. It completes the commands, each
// command's options (asked of `cotune COMMAND --help` when completing, so they never go stale), the
// formats after --format, file names after options that take a file, and the studies of the store
// on the line (or the default store) after show, report and export.
#include <cotune/core/errors.hpp>

#include <iostream>
#include <string>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {

const char* const kBashBody = R"SH(_cotune() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]}
  local exe=${COMP_WORDS[0]}
  if (( COMP_CWORD == 1 )); then
    COMPREPLY=( $(compgen -W "$_cotune_commands --help" -- "$cur") )
    return
  fi
  case $prev in
    --store|--out|-o|--output|--workload|--config|--batch|--runs|--calibration|--data|--cert|--key|--ca)
      COMPREPLY=( $(compgen -f -- "$cur") )
      return ;;
    --format)
      if [[ $cmd == import ]]; then
        COMPREPLY=( $(compgen -W "auto csv megatron-log wandb sacct" -- "$cur") )
      else
        COMPREPLY=( $(compgen -W "megatron torchtitan nemo deepspeed torchrec json" -- "$cur") )
      fi
      return ;;
    --space)
      COMPREPLY=( $(compgen -W "llm recsys" -- "$cur") )
      return ;;
    --prior)
      COMPREPLY=( $(compgen -W "analytic roofline none" -- "$cur") )
      return ;;
    --predictor)
      COMPREPLY=( $(compgen -W "krr mlp" -- "$cur") )
      return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=( $(compgen -W "$("$exe" "$cmd" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)" -- "$cur") )
    return
  fi
  case $cmd in
    show|report|export)
      local store="" i
      for (( i = 2; i < COMP_CWORD; i++ )); do
        [[ ${COMP_WORDS[i]} == --store ]] && store=${COMP_WORDS[i+1]}
      done
      COMPREPLY=( $(compgen -W "$("$exe" show ${store:+--store "$store"} 2>/dev/null | awk 'NR > 1 && NF {print $1}')" -- "$cur") ) ;;
    predictor)
      (( COMP_CWORD == 2 )) && COMPREPLY=( $(compgen -W "eval" -- "$cur") ) ;;
    completion)
      (( COMP_CWORD == 2 )) && COMPREPLY=( $(compgen -W "bash zsh" -- "$cur") ) ;;
    store)
      if (( COMP_CWORD == 2 )); then COMPREPLY=( $(compgen -W "copy" -- "$cur") ); else COMPREPLY=( $(compgen -f -- "$cur") ); fi ;;
    plugins)
      if (( COMP_CWORD == 2 )); then COMPREPLY=( $(compgen -W "check" -- "$cur") ); else COMPREPLY=( $(compgen -f -- "$cur") ); fi ;;
    *)
      COMPREPLY=( $(compgen -f -- "$cur") ) ;;
  esac
}
complete -o filenames -F _cotune cotune
)SH";

int run(int argc, char** argv) {
  const std::string shell = argc >= 2 ? argv[1] : "";
  if (shell == "-h" || shell == "--help") {
    std::cout << "usage: cotune completion bash|zsh\n\n"
                 "Prints a completion script for the shell: commands, each command's options, formats,\n"
                 "file names and the studies of the store. Load it in the current shell with\n"
                 "  eval \"$(cotune completion bash)\"      (bash; or save it as ~/.local/share/bash-completion/completions/cotune)\n"
                 "  eval \"$(cotune completion zsh)\"       (zsh, in ~/.zshrc after compinit)\n";
    return 0;
  }
  if (argc != 2 || (shell != "bash" && shell != "zsh"))
    throw core::UserError("usage: cotune completion bash|zsh (got " + (argc < 2 ? std::string("nothing") : shell) +
                          (argc > 2 ? " and more" : "") + ")");
  std::string commands;
  for (const Command& c : cli::commands()) commands += (commands.empty() ? "" : " ") + std::string(c.name);
  std::cout << "# cotune " << shell << " completion (cotune completion " << shell << ")\n";
  // zsh runs the bash function through its bash-compatible completion layer.
  if (shell == "zsh") std::cout << "autoload -U +X bashcompinit && bashcompinit\n";
  std::cout << "_cotune_commands=\"" << commands << "\"\n" << kBashBody;
  return 0;
}

}  // namespace

COTUNE_COMMAND("completion", "print a bash or zsh completion script (eval \"$(cotune completion bash)\")", run);

}  // namespace cotune::cli
