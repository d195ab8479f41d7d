"""Process tests, every one marked `slow`: the real command line, trainers, A/B groups, torchrun, pseudo-terminals and tmux, fresh interpreters."""
