//! Fragment tracking: token streams (tree-sitter-python) and whitespace-normalized text.
