package testenv

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// PrivateMariaDB starts a MariaDB server of the test's own, with args
// added to its options (say, settings that a test may not change on the
// shared server because they are global), on a free loopback port with
// an empty data directory, and returns a DSN for root on its database
// test. The server is killed when the test ends. Without mariadbd the
// test is skipped (or fails, with RequireMySQLEnv). Costs about 3 s.
func PrivateMariaDB(t testing.TB, args ...string) string {
	t.Helper()
	server, install := lookBin("mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld"), lookBin("mariadb-install-db", "mysql_install_db")
	if server == "" || install == "" {
		msg := "testenv: no mariadbd and mariadb-install-db to start a private server"
		if os.Getenv(RequireMySQLEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var user []string
	if os.Geteuid() == 0 {
		user = []string{"--user=root"} // mariadbd refuses root unless told
	}
	const logSize = "--innodb-log-file-size=16M" // the same at install and start
	out, err := exec.Command(install, append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db", logSize}, user...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: %s: %v\n%s", install, err, out)
	}
	port := freeLoopbackPort(t)
	logPath := filepath.Join(dir, "error.log")
	cmd := exec.Command(server, append(append([]string{"--no-defaults", "--datadir=" + data, "--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--log-error=" + logPath,
		"--skip-name-resolve", "--innodb-buffer-pool-size=32M", logSize}, user...), args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", server, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("private mariadbd log:\n%s", log)
		}
	})
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.ParseTime, cfg.Timeout = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", port), true, time.Second
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	WaitFor(t, 60*time.Second, "the private mariadbd to accept root", func() bool {
		select {
		case <-exited:
			t.Fatalf("testenv: the private mariadbd exited at start (its log follows)")
		default:
		}
		_, err := admin.Exec("CREATE DATABASE IF NOT EXISTS test")
		return err == nil
	})
	cfg.DBName = "test"
	return cfg.FormatDSN()
}

func lookBin(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}
