"""The check every results record is held to, and the record parts only the lab writes."""
