"""The data the bus carries: memories (model), their ids, their encoding (codec), change
events, and what ``remember`` accepts (items)."""
