"""jab from Python (`import jabcli as jab`, api.py) and what it shows: the words and figures
shared by the terminal, the notebook and the plots (formatting.py), matplotlib pictures
(plots.py) and Jupyter's HTML and SVG (notebook.py). Nothing here draws with Rich, except
api.py's live views, which it takes from the command-line layer (issue 41, item 8)."""
