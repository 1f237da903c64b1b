"""What every stage shares: errors, the Arrow schemas of the artifacts, the text
tokenizer, and the progress a step reports. Imports nothing else of ragsweep."""
