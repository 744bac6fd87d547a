"""The command line, the only layer that prints, draws or exits: the Typer commands
(cli.py), the terminal drawn with Rich (its console and common pieces in display.py, the
live views in live.py, tables of results in tables.py, heatmaps, curves and picture files in
pictures.py), Ctrl-C taken over before anything heavy is imported (interrupt.py), stdout
whose reader may go away (pipes.py), and a study cell's worker process, `python -m
jabcli.cli.worker` (worker.py)."""
