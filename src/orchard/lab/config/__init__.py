"""orchard.toml: loaded and validated whole, its values checked, and rendered back as a commented file."""
