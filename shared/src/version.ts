// Bumped with releases; host and guest are built from the same tree, so they always agree.
export const HUTCH_VERSION = "0.1.0";
