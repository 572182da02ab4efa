//! describe
