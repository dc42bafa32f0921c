"""What users run with a trained model folder: translate (generate() or CTranslate2), draw attention and positional
encodings, report a run's scores and curves. Imports flow one way: vanilla_transformer <- training <- tools."""
