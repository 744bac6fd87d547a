"""The command line, the only layer that prints, draws or exits: the Typer commands
(cli.py), the terminal's Rich tables, live views and pictures (display.py), Ctrl-C taken
over before anything heavy is imported (interrupt.py), stdout whose reader may go away
(pipes.py), and a study cell's worker process, `python -m jabcli.cli.worker` (worker.py)."""
