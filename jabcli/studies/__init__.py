"""Studies, grids of runs: the study file, its cells, the study folder and the table by
length bins (studies.py), and running the cells on worker processes or Ray tasks, with
Ctrl-C and resume (study_run.py)."""
