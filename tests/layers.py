"""The library's packages, bottom to top: each may import itself and those before it, never
those after (``tests/test_layering.py`` holds the code to it, ``tests/test_layout_page.py``
the layout page)."""

LAYERS = ["core", "env", "data", "policy", "rollout", "agent", "eval", "train", "lifecycle", "stack"]
