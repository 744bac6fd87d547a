"""What a run is, built from its config: a new run's config layered from defaults, a task's
preset or a YAML or data file, --config and --set (resolve.py), and the `Experiment`, that
config with its task, tokenizer, positional schemes and model built and checked once
(experiment.py). It stands above the tasks and the model, which it puts together."""
