"""Pure logic over plain records (never imports Ray or storage): ids, entity names, chunking,
prompts, answer parsing, fast extraction, merge rules, ranking, context, keywords."""
