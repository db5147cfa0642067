"""gymflow: the RLVR lifecycle for LLM agents."""
