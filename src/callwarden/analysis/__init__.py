"""What an argument means, knowing nothing of rules: globs, paths, URLs, shell commands,
secrets and personal data."""
