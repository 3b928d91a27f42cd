//! sage: audit recorded runs of LLM coding agents.
