-- Room on each outbox page for the new versions of its rows. A row is written once and updated
-- twice: the relay's claim sets its lease, the mark sets it published. With full pages (the
-- default fillfactor of 100) the claim's new version lands on another page and every index gets
-- an entry for it: three index insertions per claimed row, and dead entries in the unpublished
-- indexes that the next claims step over until vacuum. With half of each page free, the claim
-- changes no indexed column and its new version fits on the row's page: a heap-only (HOT) update,
-- no index entry. The table takes about twice the pages; published rows are purged by retention.
-- Pages already written keep their layout; new pages follow the setting.
ALTER TABLE {schema}.outbox SET (fillfactor = 50);
