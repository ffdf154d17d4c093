"""rlviz's own ``.pt2`` checkpoints: reading (exported, graph, codegen), vetting (safety), writing (saving)."""
