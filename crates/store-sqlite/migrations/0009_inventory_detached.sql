-- cairn store schema v9: detached inventory rows.
-- A deployment stack that detaches a resource (actionOnUnmanage detach) leaves it in place and marks its row
-- detached, in the transaction that records the detach on the stack; a deployment writing it again clears the mark.
ALTER TABLE managed_resources ADD COLUMN detached INTEGER NOT NULL DEFAULT 0;
