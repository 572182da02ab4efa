//! The registry: the stage kinds a description may use.

use super::props::StageDecl;

/// The stage kinds a description may use.
#[derive(Debug, Clone)]
pub struct Registry {
    pub(super) decls: Vec<StageDecl>,
}

impl Registry {
    /// No stages at all.
    pub fn empty() -> Self {
        Registry { decls: Vec::new() }
    }

    /// Add a stage kind (replacing one of the same name).
    pub fn register(&mut self, decl: StageDecl) -> &mut Self {
        self.decls.retain(|d| d.name != decl.name);
        self.decls.push(decl);
        self
    }

    /// The stage called `name`.
    pub fn get(&self, name: &str) -> Option<&StageDecl> {
        self.decls.iter().find(|d| d.name == name)
    }

    /// Every declaration, in registration order.
    pub fn decls(&self) -> &[StageDecl] {
        &self.decls
    }

    /// Every stage name, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.decls.iter().map(|d| d.name)
    }
}
