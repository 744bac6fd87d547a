"""Studies, grids of runs: the study file (study_file.py), a study's records (studies.py),
what decides a cell's results (specs.py), the study folder (study_folder.py), the table of
results by length bins (study_results.py), how a study is asked to run (run_options.py),
and running the cells, with Ctrl-C and resume: the driver (study_run.py), its backends,
worker processes on this machine (local.py) or Ray tasks (ray_backend.py), and a worker's
job on one cell (cell_job.py)."""
