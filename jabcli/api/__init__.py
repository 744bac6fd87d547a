"""jab from Python and what it shows: the calls (`import jabcli as jab`, api.py), the
arguments they take, checked (arguments.py), the values they return, which render
themselves in Jupyter (values.py), the public names in one list (names.py), the words and
figures shared by the terminal, the notebook and the plots (formatting.py), matplotlib
pictures (plots.py) and Jupyter's HTML and SVG (notebook.py). Nothing here draws with
Rich: a live view is the caller's to pass (`view=`), in Jupyter the notebook's by default;
the command line passes its own."""
