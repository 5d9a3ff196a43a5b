package cli

// supersedeUsage is the help of upgrade's and rollback's --supersede (docs/design.md,
// "Supersede").
const supersedeUsage = "if a revision of the release is pending, cancel it (failed: \"superseded by revision N\") and run this one once it has ended"
