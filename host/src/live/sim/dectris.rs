//! Placeholder (the next commit).
pub struct DectrisSim;
pub struct DectrisSource;
