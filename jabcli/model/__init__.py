"""What a run is, built from its config: positional schemes (positions.py), the Haiku
Transformer (model.py), the encoder-only form (encoder_only.py), the recurrent forms
(recurrent.py), and `Experiment`, the config with its task, tokenizer, scheme and model
built and checked once (experiment.py)."""
