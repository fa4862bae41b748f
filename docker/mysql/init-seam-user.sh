#!/bin/bash
# MySQL 8.4 first start: Seam's least-privilege replication user.
set -euo pipefail
mysql -uroot -p"$MYSQL_ROOT_PASSWORD" <<SQL
CREATE USER IF NOT EXISTS 'seam'@'%' IDENTIFIED BY '${SEAM_MYSQL_PASSWORD}';
GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO 'seam'@'%';
SQL
