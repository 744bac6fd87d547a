"""The models: what a model form is to the rest of jab (contract.py) and the forms by name
(registry.py); positional schemes (positions.py); the Haiku encoder-decoder Transformer
(model.py), the encoder alone (encoder_only.py), the decoder alone (decoder_only.py) and
the recurrent baselines (recurrent.py). What a run is, its config with the task and model
built from it, is the experiment layer's (jabcli/experiment/)."""
