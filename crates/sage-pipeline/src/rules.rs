//! What the user set for reading cases and traces, as one value the CLI builds once and
//! passes by reference (no process globals): the adapters' [`sage_adapters::Rules`] (turn
//! classifier, detection rules, input limits) and the history's workspace roots.

/// How a run reads cases and traces. The default is the embedded data and default limits.
/// Cloning is cheap.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// The turn classifier, the detection rules and the input limits.
    pub adapters: sage_adapters::Rules,
    /// The workspace roots of the path rule.
    pub workspace_roots: sage_history::WorkspaceRoots,
}

impl Rules {
    /// The turn classifier.
    pub fn kinds(&self) -> &sage_adapters::kinds::Classifier {
        &self.adapters.kinds
    }

    /// The size limit of an input file and the folders a case may point into.
    pub fn limits(&self) -> &sage_trace::safe::Limits {
        &self.adapters.limits
    }
}
