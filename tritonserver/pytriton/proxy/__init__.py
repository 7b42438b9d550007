"""``pytriton.proxy``'s public part here: `types.Request`, what an
inference callable receives (there is no proxy model in this package)."""
