"""Studies, grids of runs: the study file, its cells, the study folder and the table by
length bins (studies.py), and running the cells, with Ctrl-C and resume: the driver
(study_run.py), its backends, worker processes on this machine (local.py) or Ray tasks
(ray_backend.py), and a worker's job on one cell (cell_job.py)."""
