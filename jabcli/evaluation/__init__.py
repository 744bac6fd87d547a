"""A model's answers and their scores: jitted greedy decoding (decode.py) and held-out
evaluation, overall and per length (evaluate.py). The Trainer evaluates with it as it trains;
`jab eval` evaluates saved runs with it."""
