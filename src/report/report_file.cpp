// Where a rank report goes (report.hpp): its name, the job's identity, and the write to a
// temporary file renamed into place, never through a symlink.
#include "report/report.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace attrcheck {

void find_job_identity(char* out, std::size_t size) noexcept {
  if (!size) return;
  out[0] = '\0';
  const char* id = nullptr;
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}) {
    id = std::getenv(name);
    if (id && *id) break;
  }
  std::size_t n = 0;
  for (; id && *id && n + 1 < size; ++id) {
    const char c = *id;
    const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '_' || c == '-';
    out[n++] = plain ? c : '_';
  }
  out[n] = '\0';
}

void report_file_name(const RunInfo& run, char* out, std::size_t size) noexcept {
  report_file_name(run, run.rank, out, size);
}

void report_file_name(const RunInfo& run, int rank, char* out, std::size_t size) noexcept {
  Appender a{out, size};
  if (size) out[0] = '\0';
  if (run.spawned) {
    a.put("job-");
    if (run.job[0]) {
      a.put(run.job);
    } else {
      a.put("pid");
      a.num(run.pid);
    }
    a.put("-");
  }
  a.put("rank-");
  a.num(rank);
  a.put(".json");
}

bool ReportFile::prepare(const char* dir, const char* name, char* error, std::size_t error_size) noexcept {
  path_[0] = tmp_[0] = '\0';
  if (!dir || !*dir) dir = ".";
  // mkdir -p
  char partial[1024];
  const std::size_t len = std::strlen(dir);
  if (len + std::strlen(name) + 2 >= sizeof path_) {
    std::snprintf(error, error_size, "output directory path too long: %s", dir);
    return false;
  }
  for (std::size_t i = 1; i <= len; ++i) {
    if (dir[i] == '/' || dir[i] == '\0') {
      std::memcpy(partial, dir, i);
      partial[i] = '\0';
      if (::mkdir(partial, 0755) != 0 && errno != EEXIST) {
        std::snprintf(error, error_size, "cannot create %s: %s", partial, std::strerror(errno));
        return false;
      }
    }
  }
  struct stat st{};
  if (::stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::snprintf(error, error_size, "%s is not a directory", dir);
    return false;
  }
  std::snprintf(path_, sizeof path_, "%s/%s", dir, name);
  std::snprintf(tmp_, sizeof tmp_, "%s/.%s.%ld.tmp", dir, name, static_cast<long>(::getpid()));
  return true;
}

bool ReportFile::write(const RunInfo& run, const FindingStore& store) noexcept {
  if (!ready()) return false;
  // O_NOFOLLOW | O_EXCL after unlink: never write through a symlink planted at the temp name.
  ::unlink(tmp_);
  const int fd = ::open(tmp_, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = render_json(fd, run, store);
  ok = (::fsync(fd) == 0 || errno == EINVAL) && ok;
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    ::unlink(tmp_);
    return false;
  }
  return ::rename(tmp_, path_) == 0;  // rename replaces a symlink itself, never follows it
}

}  // namespace attrcheck
