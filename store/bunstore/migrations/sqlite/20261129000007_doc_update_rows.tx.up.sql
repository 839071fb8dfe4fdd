-- A row of the update log may hold several updates of one write: n of
-- them, seq being the last one's (see bunstore's updaterows.go). Rows
-- written before hold one update each.
ALTER TABLE doc_updates ADD COLUMN n INTEGER NOT NULL DEFAULT 1;
