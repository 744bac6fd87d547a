"""The ground every other layer stands on, knowing nothing of tasks, models or training:
`JabError` (the one exception for user mistakes), the config (its keys declared once, YAML and
`--set` layering), the character vocabulary, the process's JAX settings and lazy imports,
and how much memory a run needs. Nothing here imports JAX when it is imported."""
